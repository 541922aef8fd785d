"""Write the pinned fingerprints of every deterministic baseline on the 480-job Tiresias trace,
and of the per-tenant policies on a contended multi-tenant Philly run.

    python bench/sim_pins.py            # rewrite tests/data/sim_pins_tiresias_480.json
                                        # tests/data/sim_pins_philly_tenants.json
                                        # and tests/data/sim_pins_philly_512.json

``tests/test_sim_pins.py`` runs the same simulations and compares them with this file, so a
speed-up that changes a result fails there. Re-pin only for a deliberate change of behaviour,
and say in that commit why the numbers moved. (The contended 82k Philly run is pinned by
``bench/sim_scale.py --pin`` / ``--check``.)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from sim_pins_helpers import (CONTENDED_PIN_FILE, CONTENDED_POLICIES, PIN_FILE, PINNED_POLICIES,  # noqa: E402
                              TENANT_PIN_FILE, TENANT_POLICIES, run_contended_pinned, run_pinned, run_tenant_pinned)


def main() -> None:
    pins = {p: run_pinned(p) for p in PINNED_POLICIES}
    PIN_FILE.write_text(json.dumps({"trace": "tiresias_480", "cluster": "tiresias", "pins": pins}, indent=1) + "\n")
    for p, f in pins.items():
        print(f"{p:18} avg JCT {f['avg_jct']:>10} makespan {f['makespan']:>10} preemptions {f['preemptions']:>5}")
    print(f"wrote {PIN_FILE}")
    pins = {p: run_tenant_pinned(p) for p in TENANT_POLICIES}
    TENANT_PIN_FILE.write_text(json.dumps({"trace": "philly_82k[:600]", "cluster": "muri-n8g8", "pins": pins},
                                          indent=1) + "\n")
    print(f"wrote {TENANT_PIN_FILE}")
    pins = {p: run_contended_pinned(p) for p in CONTENDED_POLICIES}
    CONTENDED_PIN_FILE.write_text(json.dumps({"trace": "philly_82k[:2000]", "cluster": "philly-512", "pins": pins},
                                             indent=1) + "\n")
    print(f"wrote {CONTENDED_PIN_FILE}")


if __name__ == "__main__":
    main()
