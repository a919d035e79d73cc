"""A stand-in *job command* for the jobs tests: prints, then sleeps until stopped (Ctrl-C).

Used as ``TUNELAB_JOB_ENTRY`` so a job stays running long enough to be seen,
followed and stopped; what is under test is the service and its views.
"""

from __future__ import annotations

import sys
import time

if __name__ == "__main__":
    print("slow job started:", " ".join(sys.argv[1:]), flush=True)
    try:
        time.sleep(120)
    except KeyboardInterrupt:
        print("slow job stopped", flush=True)
        sys.exit(130)
