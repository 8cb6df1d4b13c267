#!/usr/bin/env python3
"""ceiling_rows.py: a file's median aggregates when it has them, else the medians of its repetitions (a main job's
run file), its real time in ms whatever the file's unit."""
import importlib.util
import json
import os
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("ceiling_rows", os.path.join(HERE, "ceiling_rows.py"))
cr = importlib.util.module_from_spec(spec)
spec.loader.exec_module(cr)

NAME = "expert_gemm/ffn/overlap_tma/shape:deepseek-v3/tokens:4096/routing:uniform/mode:cold/manual_time"


def repetition(real_time_ns, pct):
    return {"name": NAME, "run_type": "iteration", "time_unit": "ns", "real_time": real_time_ns,
            "pct.roofline": pct, "pct.gemm_roofline": pct + 10.0, "sm_clock_mhz": 1500.0}


class Medians(unittest.TestCase):
    def rows(self, benchmarks):
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump({"benchmarks": benchmarks}, f)
        try:
            return list(cr.medians(f.name))
        finally:
            os.unlink(f.name)

    def test_repetitions_give_their_medians_in_ms(self):
        rows = self.rows([repetition(6.3e6, 85.0), repetition(6.5e6, 82.0), repetition(9.9e6, 55.0),
                          {"name": "expert_gemm/calibration/copy", "run_type": "iteration", "real_time": 1.0}])
        self.assertEqual(len(rows), 1)
        self.assertAlmostEqual(rows[0]["real_time"], 6.5)
        self.assertAlmostEqual(rows[0]["pct.roofline"], 82.0)
        self.assertAlmostEqual(rows[0]["pct.gemm_roofline"], 92.0)
        self.assertIn("| overlap_tma | deepseek-v3 x 4096 | uniform | 6.500 | 82.0 | 92.0 |", cr.row(rows[0]))

    def test_median_aggregates_win_over_repetitions(self):
        aggregate = dict(repetition(6.0, 90.0), run_type="aggregate", aggregate_name="median", time_unit="ms")
        rows = self.rows([repetition(6.3e6, 85.0), aggregate])
        self.assertEqual(rows, [aggregate])


if __name__ == "__main__":
    unittest.main()
