"""Parties across organisations: each party in its own process, started by its owner,
holding only its own data and the keys it made itself (``docs/deployment.md``).

Modules: ``settings`` (deploy.toml), ``keys`` (a party's own keys; the registrar's signed
registry), ``data`` (a party's own view on disk; the public facts it announces),
``daemon`` (a party's process), ``framing`` and ``sockets`` (requests over Unix sockets),
``tls`` (the registrar's certificates; requests over mutual TLS),
``driver`` (the server side: discovery, the run), ``flower_client`` / ``flower_server``
(Flower's ClientApp shim and ServerApp; need the ``flower`` extra), ``loopback`` (a whole
federation on one machine, loopback only: tests, demos, benchmarks) and ``cli``.
Importing this package imports nothing else, so the ClientApp shim stays light.
"""
