#!/usr/bin/env python3
"""test_paths.py — every path cited in the tree's comments and docs exists.

    test_paths.py SOURCE_DIR        the self-test on a made-up tree, then SOURCE_DIR
    test_paths.py --fix SOURCE_DIR  the same, after writing the new place of every cited
                                    path whose file has one (review with git diff)
    test_paths.py --self-test       the self-test only

Read: the tracked files (git ls-files; a walk where SOURCE_DIR is not a git
checkout) of the kinds in EXTS and NAMES; of C and CUDA sources only the
comments, of the others the whole text. Checked:

  paths     A token like `evaluator/evaluator.h` or `docs/results/` whose first
            component is a top-level entry of the tree names a tracked file or
            folder, or a program built from one (`bench/eval_bench` from
            bench/eval_bench.c). `kevo/x.h` is read under include/, and a
            first component that is an entry of the citing file's folder
            (`refcheck/refcheck.c` in tests/) from there. A bare file name with
            an extension of BARE_EXTS (`compile.c`, `DESIGN.md`) is the name of
            a tracked file somewhere. `../x` stays inside the tree.
  links     A markdown link's target, from the linking file's folder, exists;
            its #anchor is a heading of the target.
  sections  In `docs/x.md`, "Title" (backticks, comma optional; a comment's
            title may wrap) each quoted title begins a heading of docs/x.md.
  variables Every KEVO_* variable that the product's host code reads
            (getenv in PRODUCT_DIRS) is named in docs/environment.md.

Not citations: a token holding a placeholder or a glob (<name>, NAME, foo,
*, $VAR, %s, {a,b}, ..., …), URLs, the dependencies' headers (EXTERNAL), and
ALLOWED below, each entry with its reason.

Every finding is one line, `file:line: citation: what is wrong`, with the
likely new place of a moved file; an ALLOWED entry that excuses nothing is
one too. The exit status is 1 when there is any.
"""
import fnmatch
import os
import re
import subprocess
import sys
import tempfile

EXTS = ('.c', '.h', '.cu', '.cuh', '.inc', '.in', '.sh', '.py', '.cmake', '.md', '.json', '.yml',
        '.yaml')
NAMES = ('CMakeLists.txt', 'run')                      # run: .ci/run
C_EXTS = ('.c', '.h', '.cu', '.cuh', '.inc', '.in')

BARE_EXTS = ('.c', '.h', '.cu', '.cuh', '.md', '.sh', '.py', '.cmake')
BUILT_FROM = ('.c', '.cu', '.sh', '.py')                # a program cited by its name

PRODUCT_DIRS = ('common', 'problem', 'protocol', 'archive', 'evaluator', 'worker',
                'mutate', 'search', 'report', 'cli')
ENV_DOC = 'docs/environment.md'

# Headers of the dependencies (CUDA, NCCL, cuBLAS, LMDB, zstd, cJSON, curl).
EXTERNAL = {'cuda_runtime.h', 'cuda_bf16.h', 'cuda_fp16.h', 'cuda_fp8.h', 'cublas_v2.h',
            'cooperative_groups.h', 'nccl.h', 'nccl_device.h', 'lmdb.h', 'zstd.h', 'zdict.h',
            'cJSON.h', 'curl.h'}

# Names that stand for any (example output, usage lines).
PLACEHOLDER_NAMES = {'foo', 'bar', 'x', 'y'}

# (citing file, or folder ending in '/', or None for any; the citation, or a
# prefix ending in '/', or None for any; why it is no path of this tree)
ALLOWED = [
    ('tests/integration/test_paths.py', None, "this checker's examples and made-up trees"),
    ('tests/layers/', None, "the layer test's made-up tree"),
    ('tests/integration/test_layers.sh', 'worker/worker.c', "a file of the layer test's made-up tree"),
    ('docs/results/2026-11-26.md', 'worker/worker.c',
     "test_layers' message about its made-up tree"),
    ('patterns/', 'problem/seed', 'the "<problem>/<seed>" prefix of a seed\'s messages'),
    (None, 'candidate.cu', "a candidate's name in its compile folder and in messages"),
    ('docs/new-problem.md', 'my_fused.cu', "the reader's own candidate in the guide"),
    ('docs/problems.md', 'helper.h', 'an include that is not found, the example'),
    ('docs/results.md', 'results/s', 'a rate: results per second'),
    ('docs/results/2026-11-26.md', '../', 'the paths a hostile candidate tried from its folder'),
]

PLACEHOLDER = re.compile(r'[<>*$%{}\[\]…~@|]|\.\.\.')
TOKEN = re.compile(r'[A-Za-z0-9_.\-+/<>*$%{}\[\]…~@|]+')
MD_LINK = re.compile(r'\]\(([^)\s]+)\)')
SECTION = re.compile(r'(?:(?<![\w./-])`?|\]\()((?:\.\./|[\w.\-]+/)*[\w.\-]+\.md)[`)]?[,;:]?\s+'
                     r'((?:"[^"]+"(?:\s*,\s*(?="))?)+)')
COMMENT_LEAD = re.compile(r'^\s*(?:/\*+|\*+(?!/)|//+|#+(?=\s|$))?\s?')


def tracked_files(root):
    """The tree's files relative to root: git's list, else a walk."""
    try:
        out = subprocess.run(['git', '-C', root, 'ls-files', '-z'], capture_output=True,
                             check=True).stdout.decode()
        files = [f for f in out.split('\0') if f and os.path.lexists(os.path.join(root, f))]
        if files:
            return files
    except (OSError, subprocess.CalledProcessError):
        pass
    # A walk: without .git and the top-level folders .gitignore names (/build*/, /runs/, ...).
    ignored = ['.git']
    try:
        with open(os.path.join(root, '.gitignore'), encoding='utf-8') as f:
            ignored += [g.strip().strip('/') for g in f if re.fullmatch(r'/[^/\s]+/?\s*', g)]
    except OSError:
        pass
    files = []
    for d, dirs, names in os.walk(root):
        if d == root:
            dirs[:] = [x for x in dirs if not any(fnmatch.fnmatch(x, g) for g in ignored)]
        files += [os.path.relpath(os.path.join(d, n), root) for n in names]
    return files


def read_kind(rel):
    base = os.path.basename(rel)
    if base.endswith(C_EXTS):
        return 'c'
    if base.endswith(EXTS) or base in NAMES:
        return 'text'
    return None


def c_comments(text):
    """text with everything but comments blanked; line breaks kept."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith('//', i) or text.startswith('/*', i):
            line = text[i + 1] == '/'
            j = text.find('\n' if line else '*/', i + 2)
            j = n if j < 0 else (j if line else j + 2)
            out.append(text[i:j])
            i = j
        elif c in '"\'':
            j = i + 1
            while j < n and text[j] != c and text[j] != '\n':
                j += 2 if text[j] == '\\' else 1
            out.append(re.sub(r'[^\n]', ' ', text[i:j + 1]))
            i = j + 1
        else:
            out.append(c if c == '\n' else ' ')
            i += 1
    return ''.join(out)


def headings(text):
    """The titles of a markdown file's headings, outside code fences."""
    titles, fence = [], False
    for line in text.splitlines():
        if line.startswith('```'):
            fence = not fence
        elif not fence:
            m = re.match(r'#{1,6}\s+(.*?)\s*#*\s*$', line)
            if m:
                titles.append(m.group(1))
    return titles


def norm_title(t):
    """A title as compared: no markup, no section number ("6. Timing"), any case."""
    t = re.sub(r'\s+', ' ', re.sub(r'[`*_]', '', t)).strip()
    return re.sub(r'^\d+(\.\d+)*\.?\s+', '', t).rstrip('.…').strip().casefold()


def slug(title):
    """GitHub's anchor of a heading."""
    t = re.sub(r'[^\w\- ]', '', title.strip().lower())
    return t.replace(' ', '-')


ALLOWED_USED = set()   # the indexes of ALLOWED that excused a token in this check


def allowed(rel, token):
    for k, (where, what, _) in enumerate(ALLOWED):
        in_where = where is None or rel == where or (where.endswith('/') and rel.startswith(where))
        if not in_where:
            continue
        if what is None or token == what or (what.endswith('/') and token.startswith(what)):
            ALLOWED_USED.add(k)
            return True
    return False


def placeholder(tok):
    if PLACEHOLDER.search(tok) or '//' in tok:
        return True
    for part in tok.strip('/').split('/'):
        stem = part.split('.')[0]
        if stem in PLACEHOLDER_NAMES or \
                (re.fullmatch(r'[A-Z][A-Z0-9_]*', stem) and not part.endswith('.md')) or \
                re.search(r'-[A-Z][A-Z0-9_]*$', stem):  # src-N, src-VERSION
            return True
    return False


class Tree:
    def __init__(self, root):
        self.root = root
        self.files = tracked_files(root)
        self.paths = set(self.files)
        self.dirs = {''}
        for f in self.files:
            parts = f.split('/')
            self.dirs.update('/'.join(parts[:k]) for k in range(1, len(parts)))
        self.top = {f.split('/')[0] for f in self.files}
        self.by_name = {}
        for f in self.files:
            self.by_name.setdefault(os.path.basename(f), []).append(f)
        self.include_top = {f.split('/')[1] for f in self.files
                            if f.startswith('include/') and f.count('/') >= 2}
        self.cache = {}

    def exists(self, p):
        p = p.rstrip('/')
        return p in self.paths or p in self.dirs

    def read(self, rel):
        if rel not in self.cache:
            try:
                with open(os.path.join(self.root, rel), encoding='utf-8', errors='replace') as f:
                    self.cache[rel] = f.read()
            except OSError:
                self.cache[rel] = None
        return self.cache[rel]

    def moved_to(self, p):
        """Where a file of p's name is now, as advice."""
        base = os.path.basename(p.rstrip('/'))
        places = self.by_name.get(base, [])
        if not places:  # a program: cited by its source's name without the extension
            places = [f[:-len(ext)] for ext in BUILT_FROM for f in self.by_name.get(base + ext, [])]
        if not places and p.endswith('/'):
            places = sorted(d + '/' for d in self.dirs if d.split('/')[-1] == base)
        return places[:3]


def stale(msg, tree, p):
    places = tree.moved_to(p)
    return msg + ('; now ' + ' or '.join(places) + '?' if places else '')


def check_token(tree, rel, raw):
    """None when raw is no citation or a true one; else what is wrong."""
    tok = raw.rstrip('.,:;')
    if tok.startswith('./'):
        tok = tok[2:]
    if not tok or tok.startswith('/') or placeholder(tok) or allowed(rel, tok):
        return None, tok
    here = os.path.dirname(rel)
    if tok.startswith('../'):
        full = os.path.normpath(os.path.join(here, tok))
        if full.startswith('..'):
            return 'outside the tree (cite what lies outside it in words)', tok
        if tree.exists(full):
            return None, tok
        return stale('no such file or folder from %s/ (outside the tree? cite it in words)'
                     % here, tree, full), tok
    if '/' in tok:
        first = tok.split('/')[0]
        if first in tree.top:
            full = tok
        elif first in tree.include_top:
            full = 'include/' + tok
        elif here and tree.exists(here + '/' + first):
            full = here + '/' + tok
        else:
            return None, tok
        if tree.exists(full) or any(full + e in tree.paths for e in BUILT_FROM):
            return None, tok
        places = tree.moved_to(full)
        if full == tok and len(places) == 1:  # --fix may write the one new place
            return stale('no such file or folder', tree, full), (tok, places[0])
        return stale('no such file or folder', tree, full), tok
    stem = tok.split('.')[0]
    if tok.endswith(BARE_EXTS) and len(stem) > 1 and tok not in tree.by_name and \
            tok not in EXTERNAL:
        return 'no tracked file of that name', tok
    return None, tok


def check_link(tree, rel, target):
    if re.match(r'[a-z][a-z0-9+.-]*:', target):
        return None
    path, _, anchor = target.partition('#')
    full = os.path.normpath(os.path.join(os.path.dirname(rel), path)) if path else rel
    if full.startswith('..'):
        return 'link outside the tree'
    if not tree.exists(full):
        return stale('link to no such file or folder', tree, full)
    if anchor and full.endswith('.md'):
        if anchor not in {slug(h) for h in headings(tree.read(full) or '')}:
            return 'no heading of %s has the anchor #%s' % (full, anchor)
    return None


def check_paths(tree, rel, lines, findings):
    for lineno, line in enumerate(lines, 1):
        skip = []
        if rel.endswith('.md'):
            for m in MD_LINK.finditer(line):
                skip.append(m.span(1))
                why = check_link(tree, rel, m.group(1))
                if why and not allowed(rel, m.group(1)):
                    findings.append((rel, lineno, m.group(1), why))
        for m in TOKEN.finditer(line):
            if any(a <= m.start() < b for a, b in skip):
                continue
            why, tok = check_token(tree, rel, m.group(0))
            if why and isinstance(tok, tuple):
                findings.append((rel, lineno, tok[0], why, tok[1]))
            elif why:
                findings.append((rel, lineno, tok, why))


def check_sections(tree, rel, lines, findings):
    # The lines joined with their comment leaders taken off, so that a
    # title wrapped in a comment reads whole.
    flat, starts = [], []
    pos = 0
    for line in lines:
        piece = line if rel.endswith('.md') else COMMENT_LEAD.sub('', line)
        starts.append(pos)
        flat.append(piece)
        pos += len(piece) + 1
    text = ' '.join(flat)
    for m in SECTION.finditer(text):
        path = m.group(1)
        full = path if '/' in path and not path.startswith('../') else \
            os.path.normpath(os.path.join(os.path.dirname(rel), path))
        if full not in tree.paths and '/' not in path:
            full = path  # README.md, CHANGELOG.md: at the root
        if full not in tree.paths:
            continue  # no path of this tree, or a stale one that check_paths reports
        heads = [norm_title(h) for h in headings(tree.read(full) or '')]
        lineno = next(i for i in range(len(starts), 0, -1) if starts[i - 1] <= m.start())
        for title in re.findall(r'"([^"]+)"', m.group(2)):
            want = norm_title(title)
            if not any(h.startswith(want) for h in heads):
                findings.append((rel, lineno, '%s, "%s"' % (path, title),
                                 'no heading of %s begins so' % full))


def check_environment(tree, findings):
    doc = tree.read(ENV_DOC)
    if doc is None:
        findings.append((ENV_DOC, 0, ENV_DOC, 'missing'))
        return
    documented = set(re.findall(r'KEVO_[A-Z0-9_]+', doc))
    for rel in tree.files:
        if rel.split('/')[0] not in PRODUCT_DIRS or read_kind(rel) != 'c':
            continue
        for lineno, line in enumerate((tree.read(rel) or '').splitlines(), 1):
            for name in re.findall(r'getenv\s*\(\s*"(KEVO_[A-Z0-9_]+)"', line):
                if name not in documented:
                    findings.append((rel, lineno, name, 'read by kevo, not in ' + ENV_DOC))


def check_tree(root):
    tree = Tree(root)
    findings = []
    ALLOWED_USED.clear()
    for rel in tree.files:
        kind = read_kind(rel)
        text = tree.read(rel) if kind else None
        if text is None:
            continue
        lines = (c_comments(text) if kind == 'c' else text).splitlines()
        check_paths(tree, rel, lines, findings)
        check_sections(tree, rel, lines, findings)
    check_environment(tree, findings)
    return findings


# The self-test: a made-up tree with one of each stale citation and one of
# each thing that is not a citation; exactly the stale ones must be found.
SELF_TREE = {
    'docs/guide.md': '# Guide\n\n## The first part\n\n## Second `part`\n\n### 3. Three\n'
                     'See `docs/gone.md` and `src/x.c` (no entry), [it](other.md) and '
                     '[part](#the-first-part), [none](#no-such-part), [up](../README.md).\n'
                     'Fine: `common/a.c`, `common/`, `docs/guide.md`, `common/<name>.c`, '
                     '`problems/NAME/x.json`, `runs/1/`, `$OUT/common/b.c`, `common/*.c`, '
                     'https://example.com/common/b.c, `tools/run` (built from tools/run.c).\n'
                     'Stale: `common/b.c`, `tools/gone`, `DESIGN.md`, `kevo/old.h`, '
                     '[other](nothere.md#x), `../../outside.md`.\n'
                     'Sections: (`docs/guide.md`, "The first"), `docs/guide.md`, "Second part", '
                     '`docs/guide.md` "Third part", [g](guide.md), "Three", '
                     '[g](guide.md), "Four".\n',
    'docs/other.md': '# Other\n',
    'docs/environment.md': '| `KEVO_KNOWN` | x |\n',
    'README.md': '# R\n',
    'common/a.c': '/* a.c — cites common/a.h (moved: it is in include/) and a.c;\n'
                  ' * docs/guide.md, "Second\n * part", and (docs/guide.md, "Fourth\n'
                  ' * part"). */\n'
                  'static const char *p = "common/missing.c"; /* a string: no citation */\n'
                  'const char *k = getenv("KEVO_KNOWN"), *u = getenv("KEVO_UNKNOWN");\n',
    'include/kevo/a.h': '/* kevo/a.h; candidate.cu; nccl.h */\n',
    'tools/run.c': '/* tests/ is no top-level entry here: tests/x.c is not checked */\n',
}
SELF_EXPECT = {
    ('docs/guide.md', 8, 'docs/gone.md'), ('docs/guide.md', 8, 'no-such-part'),
    ('docs/guide.md', 10, 'common/b.c'), ('docs/guide.md', 10, 'tools/gone'),
    ('docs/guide.md', 10, 'DESIGN.md'), ('docs/guide.md', 10, 'kevo/old.h'),
    ('docs/guide.md', 10, 'nothere.md#x'), ('docs/guide.md', 10, '../../outside.md'),
    ('docs/guide.md', 11, 'Third part'), ('docs/guide.md', 11, 'Four'),
    ('common/a.c', 1, 'common/a.h'), ('common/a.c', 3, 'Fourth part'),
    ('common/a.c', 6, 'KEVO_UNKNOWN'),
}


def self_test():
    with tempfile.TemporaryDirectory(prefix='kevo-paths.') as root:
        for rel, text in SELF_TREE.items():
            os.makedirs(os.path.join(root, os.path.dirname(rel)), exist_ok=True)
            with open(os.path.join(root, rel), 'w', encoding='utf-8') as f:
                f.write(text)
        findings = check_tree(root)
        got = [f[:3] for f in findings]
        # --fix writes the one new place of a moved file, and only that
        with open(os.path.join(root, 'common/a.c'), encoding='utf-8') as f:
            before = f.read()
        fixed = fix(root, findings, say=lambda _: None) == 1
        with open(os.path.join(root, 'common/a.c'), encoding='utf-8') as f:
            fixed = fixed and f.read() == before.replace('common/a.h', 'include/kevo/a.h', 1)
        fixed = fixed and not any(f[2] == 'common/a.h' for f in check_tree(root))
    matched, failed = set(), 0
    for f, line, what in sorted(SELF_EXPECT):
        hit = [g for g in got if g[:2] == (f, line) and what in g[2]]
        matched.update(hit)
        if not hit:
            print('self-test: not found: %s:%d: %s' % (f, line, what))
            failed = 1
    for f, line, what in got:
        if (f, line, what) not in matched:
            print('self-test: reported but true: %s:%d: %s' % (f, line, what))
            failed = 1
    if not fixed:
        print('self-test: --fix did not write include/kevo/a.h for common/a.h alone')
        failed = 1
    if failed:
        print('self-test FAILED: the checker misses stale citations or reports true ones')
        return 1
    print('self-test: the %d stale citations of a made-up tree found, nothing else'
          % len(SELF_EXPECT))
    return 0


def fix(root, findings, say=print):
    """Writes the one new place of each moved path cited, in its line. Returns the count."""
    done = 0
    for rel, lineno, old, _, new in (f for f in findings if len(f) == 5):
        path = os.path.join(root, rel)
        with open(path, encoding='utf-8') as f:
            lines = f.read().split('\n')
        pat = re.compile(r'(?<![\w./-])' + re.escape(old) + r'(?![\w/-])')
        line, n = pat.subn(new, lines[lineno - 1], count=1)
        if n:
            lines[lineno - 1] = line
            with open(path, 'w', encoding='utf-8') as f:
                f.write('\n'.join(lines))
            say('%s:%d: %s -> %s' % (rel, lineno, old, new))
            done += 1
    return done


def main(argv):
    args = argv[1:]
    fixing = args[:1] == ['--fix']
    if fixing:
        args = args[1:]
    if len(args) != 1:
        print('usage: test_paths.py [--fix] SOURCE_DIR | --self-test', file=sys.stderr)
        return 2
    if self_test() != 0:
        return 1
    if args[0] == '--self-test':
        return 0
    root = args[0]
    findings = check_tree(root)
    if fixing and fix(root, findings):
        findings = check_tree(root)
    with open(__file__, encoding='utf-8') as f:
        own = f.read().splitlines()
    for k, (where, what, why) in enumerate(ALLOWED):
        if k not in ALLOWED_USED:
            line = next((i for i, t in enumerate(own, 1)
                         if repr(why) in t or ('"%s"' % why) in t), 0)
            findings.append(('tests/integration/test_paths.py', line, 'ALLOWED (%s, %s)' % (where, what),
                             'excuses nothing now (%s): the file moved, or the entry can go'
                             % why))
    for rel, lineno, what, why, *_ in findings:
        print('%s:%d: %s: %s' % (rel, lineno, what, why))
    if findings:
        print('%d stale citation(s) in %s: mend each (--fix writes the paths whose file has '
              'one new place), or add it to ALLOWED in tests/integration/test_paths.py with the reason '
              'it is no path of the tree' % (len(findings), root))
        return 1
    print('every cited path, section and variable exists (%s)' % root)
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
