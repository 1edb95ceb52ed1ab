"""Print the E-step roofline table of bench JSON lines (tools/roofline_sweep.sh): per run,
chunking, K, Mtoken/s, held-out, the sample phase against its floor."""

import json
import sys

print("corpus prefetch chunks K mean steady heldout | sample_ms floor_ms bound over nnz a_l2 "
      "hbm_B/tok l2_B/tok l1_sectors/tok | hbm_ms l2_ms l1_ms | rebuild count bhat")
for path in sys.argv[1:]:
    try:
        lines = [json.loads(line) for line in open(path) if line.startswith("{")]
    except OSError as error:
        print(path, error)
        continue
    for r in lines:
        if r.get("type") != "result":
            continue
        p = r.get("phases", {})
        s = p.get("sample", {})
        ms = lambda x: round(1e3 * x, 2) if isinstance(x, float) else x  # noqa: E731
        print(r["corpus"][:14], r.get("prefetch_blocks", 1), r.get("num_chunks"), r["K"], r["Mtoken_per_s_mean"],
              r["Mtoken_per_s_steady"], r.get("heldout_loglik_per_token"), "|",
              ms(s.get("seconds")), ms(s.get("floor_seconds")), s.get("floor_bound"),
              s.get("over_floor"), s.get("nnz_per_token"), s.get("a_l2_share"),
              s.get("hbm_bytes_per_token"), s.get("l2_bytes_per_token"),
              s.get("l1_sectors_per_token"), "|", ms(s.get("hbm_seconds")),
              ms(s.get("l2_seconds")), ms(s.get("l1_seconds")), "|",
              *(ms(p.get(n, {}).get("seconds")) for n in ("rebuild_a", "count_b", "bhat_trees")),
              "copy", r.get("copy_GB_per_s"))
