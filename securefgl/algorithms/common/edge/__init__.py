"""The edge runtime that SpreadFGL / FedGL and FedSage(+) share (Zhong et al.'s edge-client
collaborative FGL; Zhang et al.'s FedSage): GraphSAGE-style nets on sparse and generated
rows (``model``), a client of an edge server (``client``), an edge server (``server``),
their builders (``parties``) and the round loop (``runtime``)."""
