/* schedule_prompt.c — the schedule language for prompts (schedule_prompt.h).
 * A compact copy of docs/schedules.md ("Text form", "Phases", "Invariants");
 * tests/integration/test_sched_mutator.c checks that every collective, phase kind, field
 * and word value the parser knows is named here. */
#include "mutate/schedule_prompt.h"

static const char grammar[] =
    "A schedule writes one call of the collective as phases, each saying how it moves its "
    "data; kevo generates the whole .cu file from it (on patterns/kevo_sched.cuh). One line "
    "per section (or sections joined by `; `): the head, then 1 to 4 phases; fields are "
    "`key=value` separated by spaces; a field left out takes its default; sizes are bytes or "
    "take K and M.\n"
    "\n"
    "```\n"
    "schedule := head (SEP phase)+      SEP := ';' | newline\n"
    "head     := COLL (key=value)*      keys: threads ctas launch ll_max\n"
    "phase    := KIND (key=value)*      keys: algo dir xport proto chunk inflight sync order fuse\n"
    "COLL     := allreduce | allgather | reducescatter | alltoall | broadcast | fp8_allgather\n"
    "KIND     := ar | rs | ag | a2a | bc | scatter | quant | local\n"
    "```\n"
    "\n"
    "Fields (default first where one applies):\n"
    "- threads: 512, 128, 256, 1024 (threads per CTA); ctas: 2, 1..4 (CTAs per SM); "
    "launch: fused (one kernel per call) or split (one kernel per phase); ll_max: 256K, "
    "16K..4M powers of 2 (bytes per rank up to which ll/ll128 phases use their protocol, "
    "simple above).\n"
    "- algo: direct (every peer at once), ring (W-1 steps with one neighbour, forwarding), "
    "tree (binary tree from rank 0); dir: pull (the reader loads from peers) or push (the "
    "writer stores into peers); xport: sm16, sm8, sm4 (SM loads/stores of that many bytes), "
    "tma (bulk copies through shared memory), ce (cudaMemcpyAsync between barrier kernels), "
    "nvls (multimem); proto: simple (data, then a flag or barrier), ll (8-byte words of 4 "
    "bytes and the epoch), ll128 (128-byte lines of 120 bytes and a flag); chunk: 0 (whole "
    "parts) or 4K..1M powers of 2 (chunk c to CTA c mod G; tma: the tile, default 16K); "
    "inflight: 4, 1, 2, 8, 16 (SM: vectors in flight per thread; tma: stages; ce: pieces); "
    "sync: cta, grid, chunk (what ends the phase: CTA b meets CTA b of every rank; every CTA "
    "of every rank; a flag per chunk); order: ring, rev, xor (peer of step k: r+k, r-k, r^k); "
    "fuse: none, quant (fp8 quantisation fused into the phase).\n"
    "\n"
    "Phase sequences: allreduce `ar` (one-shot) or `rs ag` (two-shot: reduce-scatter, then "
    "all-gather); allgather `ag` or `local ag`; reducescatter `rs`; alltoall `a2a` or `local "
    "a2a`; broadcast `bc` or `scatter ag`; fp8_allgather `quant ag` or `ag fuse=quant`. "
    "`local` copies this rank's own shard alone.\n"
    "\n"
    "Invariants (a schedule that breaks one is refused, naming it):\n"
    "1. The phase sequence is one of the above for the collective.\n"
    "2. ring only for rs, ag, bc; tree only for bc; ar, a2a, scatter, quant, local are "
    "direct.\n"
    "3. quant and local: dir=pull, an SM xport, proto=simple.\n"
    "4. ll and ll128 need dir=push, an SM xport, algo=direct, on ar, rs, ag, a2a or bc.\n"
    "5. ce only on ag, a2a, bc, scatter, and ar/rs with dir=push; it needs proto=simple, "
    "chunk=0, sync=grid, fuse=none, algo=direct.\n"
    "6. tma needs proto=simple and a chunk of 4K..64K with inflight x chunk <= 192K.\n"
    "7. nvls only on ar, rs, ag with proto=simple, algo=direct (and only where the run allows "
    "multicast).\n"
    "8. sync=cta before a phase that reads this one (the ag after rs, scatter or quant) needs "
    "both on the same SM width or the same tma tile, algo=direct, no ce; sync=chunk needs the "
    "same nonzero chunk in both (and a chunk in every phase that uses it).\n"
    "9. fuse=quant only on the ag of fp8_allgather without a quant phase, which must have "
    "it, with an SM xport and proto=simple.\n"
    "10. launch=split needs at least two phases.\n"
    "\n"
    "The cell a schedule aims at: nvls if a phase uses it, else tma if one does, else ce if "
    "every data phase uses ce, else sm; fused when launch=fused and no phase uses ce.\n"
    "xport=nvls compiles but is never run where multicast is forbidden (verdict "
    "nvls_refused).\n";

static const char reply_form[] =
    "3. When the parent was generated from a schedule (its `// kevo:schedule` line): a new "
    "schedule of the same collective instead of code, in one fenced block tagged schedule; "
    "kevo generates the file from it:\n"
    "```schedule\n<the schedule>\n```\n";

const char *kv_sched_prompt_grammar(void)
{
    return grammar;
}

const char *kv_sched_prompt_reply_form(void)
{
    return reply_form;
}
