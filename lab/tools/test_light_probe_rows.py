#!/usr/bin/env python3
"""light_probe_rows.rows_of against a hand-made bench result with known parts, and against one with no overlap case."""
import json
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from light_probe_rows import EXPERT_WEIGHT_BYTES, rows_of  # noqa: E402


def bench(name, **fields):
    return dict(name=name, run_type="aggregate", aggregate_name="median", **fields)


class RowsOf(unittest.TestCase):
    def write(self, benchmarks):
        f = tempfile.NamedTemporaryFile("w", suffix=".json", delete=False)
        json.dump({"benchmarks": benchmarks}, f)
        f.close()
        self.addCleanup(os.unlink, f.name)
        return f.name

    def test_parts_bandwidth_from_expert_counts_and_times(self):
        # 100 light experts in 2 + 1 ms and 156 heavy ones in 4 + 2 ms, copy at 4000 GB/s.
        path = self.write([
            bench("expert_gemm/calibration/copy/manual_time", **{"GB/s": 4000.0}),
            bench("expert_gemm/ffn/overlap_tma/shape:deepseek-v3/tokens:4096/routing:zipf/mode:cold/manual_time",
                  **{"light.experts": 100.0, "light.rows": 3000.0, "light.form": 6.0, "light.gate_up_ms": 2.0,
                     "light.down_ms": 1.0, "heavy.gate_up_ms": 4.0, "heavy.down_ms": 2.0,
                     "pct.gemm_roofline": 81.25, "pct.roofline": 72.5, "sm_clock_mhz": 1500.0}),
        ])
        (row,) = list(rows_of(path))
        light_gbps = 100 * EXPERT_WEIGHT_BYTES / 3.0 / 1e6
        heavy_gbps = 156 * EXPERT_WEIGHT_BYTES / 6.0 / 1e6
        self.assertEqual(row[1:5], ("zipf", 6, 100, 3000))
        self.assertEqual(row[6], round(light_gbps))
        self.assertEqual(row[7], f"{100 * light_gbps / 4000:.0f}%")
        self.assertEqual(row[8], round(heavy_gbps))
        self.assertEqual(row[9:11], ("81.2", "72.5"))

    def test_results_without_an_overlap_case_give_no_rows(self):
        path = self.write([bench("expert_gemm/ffn/bucketed/shape:small/tokens:128/routing:uniform/mode:hot/manual_time",
                                 **{"pct.roofline": 50.0})])
        self.assertEqual(list(rows_of(path)), [])


if __name__ == "__main__":
    unittest.main()
