"""FedVN's family is found through its entry point; before the package is re-installed
with it, the tests register it in-process (a temporary site with the one line)."""

from benchmarks.harness.plugin_family import ensure_family

ensure_family("fedvn", "securefgl.algorithms.fedvn:FAMILY")
