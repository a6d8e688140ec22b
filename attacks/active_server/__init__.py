"""The "active server" adversary: a server that lies (Bonawitz et al. 2017, Sec. 6).

Each attack runs a dishonest server against honest, unmodified clients and is scored under
both threat models (``honest-but-curious`` protocols; ``malicious`` = signed messages and
consistency checks, :mod:`protocols.identity`):

* :mod:`~attacks.active_server.secagg`: inconsistent dropout, share replay and message
  (key) substitution against SecAgg / SecAgg+ (input recovered);
* :mod:`~attacks.active_server.cohort`: the pair cohort, one protocol state per pair of
  clients against SecAgg / SecAgg+ (every pair's sum recovered; refused by the minimum
  cohort the clients enforce);
* :mod:`~attacks.active_server.ckks`: forged aggregates (plaintext offset, silent drop,
  stale replay) against CKKS aggregation (result corrupted undetected);
* :mod:`~attacks.active_server.secure_sums`: key substitution against masked secure sums
  (FedStruct's Ā, FedGCN: every block read);
* :mod:`~attacks.active_server.audit`: all of them, as rows of the privacy audit.

The clients are the library's own; only the server's side is replaced. A refusing client
goes silent and the attack continues with the others (:mod:`~attacks.active_server.driver`).
"""
