/* datadir.h — where kevo's data is: include/ (the candidate ABI), patterns/,
 * problems/ and docs/abi.md, read at run time. */
#ifndef KEVO_DATADIR_H
#define KEVO_DATADIR_H

/* The data root, the first of:
 *   $KEVO_HOME, when set and not empty;
 *   <dir of the running binary>/../share/kevo, when it holds problems/ (an
 *   installed kevo: cmake --install puts the data there);
 *   the source tree kevo was built from (KEVO_SOURCE_DIR, compiled in).
 * Found once, on the first call (not thread-safe before it returns), and
 * never NULL; the string lives as long as the process. */
const char *kv_data_root(void);

#endif
