#!/usr/bin/env python3
"""marginal_cost.py's figures against hand-computed values, and its reader against malformed files."""
import importlib.util
import json
import os
import statistics
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("marginal_cost", os.path.join(HERE, "..", "tools", "marginal_cost.py"))
mc = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mc)


def visit(rnd, side, lora, *ms):
    return {"round": rnd, "side": side, "lora": lora, "ms": list(ms), "lora_phase_ms": [0.0] * len(ms)}


def doc(rounds, sides=("a", "b")):
    """Side a: 10.0 ms with the LoRA, 9.0 without (marginal 1.0); side b: 10.5 and 9.7 (0.8)."""
    times = {("a", True): 10.0, ("a", False): 9.0, ("b", True): 10.5, ("b", False): 9.7}
    visits = [visit(r, s, l, times[(s, l)] - 0.1, times[(s, l)], times[(s, l)] + 5.0)  # median: the middle pass
              for r in range(rounds) for s in sides for l in (True, False)]
    return {"sides": list(sides), "loop_lora_phase_ms": [19.0, 20.0, 21.0], "visits": visits, "cpu": "test"}


class Figures(unittest.TestCase):
    def test_hand_computed(self):
        s = mc.summarize([doc(5), doc(4)])
        a, b = s["sides"]
        self.assertEqual((a["side"], a["rounds"], b["rounds"]), ("a", 9, 9))
        self.assertAlmostEqual(s["loop_ms"], 20.0)
        self.assertAlmostEqual(a["marginal_ms"], 1.0)
        self.assertAlmostEqual(a["speedup"], 20.0)
        self.assertAlmostEqual(a["share_pct"], 10.0)
        self.assertAlmostEqual(b["marginal_ms"], 0.8)
        self.assertAlmostEqual(b["speedup"], 25.0)
        self.assertAlmostEqual(b["share_pct"], 100 * 0.8 / 10.5)
        d = s["against_first"][0]
        self.assertAlmostEqual(d["marginal_diff"], -0.2)
        self.assertEqual((d["marginal_lower"], d["with_lower"]), (9, 0))
        self.assertAlmostEqual(d["with_diff"], 0.5)

    def test_round_missing_a_layer_is_left_out(self):
        d = doc(3)
        d["visits"] = [v for v in d["visits"] if not (v["round"] == 1 and v["side"] == "b" and not v["lora"])]
        s = mc.summarize([d])
        self.assertEqual([r["rounds"] for r in s["sides"]], [3, 2])
        self.assertEqual(s["against_first"][0]["rounds"], 2)

    def test_interval_ends_map_to_the_targets(self):
        d = doc(1)
        d["visits"] += [visit(1, "a", True, 10.0), visit(1, "a", False, 8.0)] + \
                       [visit(1, "b", l, 1.0) for l in (True, False)]
        a = mc.summarize([d])["sides"][0]
        lo, hi = a["interval"]
        self.assertLessEqual(lo, a["marginal_ms"])
        self.assertGreaterEqual(hi, a["marginal_ms"])
        self.assertAlmostEqual(a["speedup_range"][0], 20.0 / hi)
        self.assertAlmostEqual(a["share_range"][1], 100 * hi / a["with_ms"])


class Bootstrap(unittest.TestCase):
    def test_constant_values(self):
        self.assertEqual(mc.bootstrap_median_interval([2.5] * 30), (2.5, 2.5))

    def test_brackets_the_median_and_is_seeded(self):
        values = [float(v) for v in range(1, 102)]
        lo, hi = mc.bootstrap_median_interval(values)
        self.assertTrue(40 < lo < statistics.median(values) < hi < 62, (lo, hi))
        self.assertEqual((lo, hi), mc.bootstrap_median_interval(values))


    def test_processes_are_the_unit(self):
        # two processes at 1 and 3 ms: the pooled median of a resample is 1, 2 or 3, whatever the rounds say
        self.assertEqual(mc.cluster_bootstrap_interval([[1.0] * 50, [3.0] * 50]), (1.0, 3.0))

    def test_per_process_medians_reported(self):
        d1, d2 = doc(3), doc(3)
        for v in d2["visits"]:
            if v["side"] == "a" and v["lora"]:
                v["ms"] = [x + 0.5 for x in v["ms"]]
        a = mc.summarize([d1, d2])["sides"][0]
        self.assertEqual([round(m, 9) for m in a["process_medians"]], [1.0, 1.5])
        self.assertEqual(a["interval"], (1.0, 1.5))


class Reader(unittest.TestCase):
    def load(self, content):
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            f.write(content if isinstance(content, str) else json.dumps(content))
        self.addCleanup(os.unlink, f.name)
        with self.assertRaises(SystemExit) as e:
            mc.load_doc(f.name)
        self.assertIn(f.name, str(e.exception.code))
        return str(e.exception.code)

    def test_not_json(self):
        self.load('{"sides": [')

    def test_missing_field(self):
        d = doc(1)
        del d["visits"]
        self.assertIn("'visits'", self.load(d))

    def test_visit_field_of_the_wrong_type(self):
        d = doc(1)
        d["visits"][2]["lora"] = "yes"
        self.assertIn("visits[2]: field 'lora'", self.load(d))

    def test_unknown_side(self):
        d = doc(1)
        d["visits"][0]["side"] = "c"
        self.assertIn("side 'c'", self.load(d))

    def test_empty_passes(self):
        d = doc(1)
        d["visits"][1]["ms"] = []
        self.assertIn("visits[1]: field 'ms' is empty", self.load(d))

    def test_side_without_both_layers(self):
        d = doc(2)
        d["visits"] = [v for v in d["visits"] if v["side"] == "a" or v["lora"]]
        with self.assertRaises(SystemExit) as e:
            mc.summarize([d])
        self.assertIn("side 'b'", str(e.exception.code))


if __name__ == "__main__":
    unittest.main()
