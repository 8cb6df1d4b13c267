#!/usr/bin/env python3
"""ncu_bytes.py against ncu text in the layout `ncu --section SpeedOfLight` prints (units as ncu picks them)."""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ncu_bytes  # noqa: E402

NCU = """==PROF== Connected to process 1651 (/tmp/bench)
  nvjet_sm90_tst_128x112_64x7_4x1_v_bz_ptrBatch_TNT (4, 30, 1)x(384, 1, 1), Context 1, Stream 18, Device 0, CC 9.0
    Section: GPU Speed Of Light Throughput
    DRAM Throughput                   %        86.03
    Duration                         us       373.82
    L2 Cache Throughput               %        92.04
    Memory Throughput                          Tbyte/s         4.14
    L2 Hit Rate                                      %        12.50
  void unnamed>::light_gemm_tma_kernel<192>(unnamed>::TmaParams) (132, 1, 1)x(384, 1, 1), Context 1, Stream 31, Device 0, CC 9.0
    Duration                         ms         3.97
    L2 Cache Throughput               %        96.01
    Memory Throughput                          Gbyte/s       995.83
  broken_kernel (1, 1, 1)x(32, 1, 1), Context 1, Stream 7, Device 0, CC 9.0
    Memory Throughput                          Tbyte/s         1.00
"""


class NcuBytes(unittest.TestCase):
    def test_units_and_bytes(self):
        rows = ncu_bytes.launches(NCU)
        self.assertEqual(len(rows), 2)  # the launch without a duration is left out
        name, ms, tbs, l2, hit = rows[0]
        self.assertEqual(name, "nvjet_sm90_tst_128x112_64x7_4x1_v_bz_ptrBatch_TNT")
        self.assertAlmostEqual(ms, 0.37382)
        self.assertAlmostEqual(tbs, 4.14)
        self.assertAlmostEqual((l2, hit), (92.04, 12.5))
        name, ms, tbs, l2, hit = rows[1]
        self.assertTrue(name.startswith("void unnamed>::light_gemm_tma_kernel<192>"))
        self.assertAlmostEqual(ms, 3.97)
        self.assertAlmostEqual(tbs, 0.99583)
        self.assertNotEqual(hit, hit)  # no L2 hit rate in that block: NaN

    def test_sum(self):
        ms, gb = ncu_bytes.launch_sum(ncu_bytes.launches(NCU), 1, 2)
        self.assertAlmostEqual(ms, 0.37382 + 3.97)
        self.assertAlmostEqual(gb, 0.37382 * 4.14 + 3.97 * 0.99583)


if __name__ == "__main__":
    unittest.main()
