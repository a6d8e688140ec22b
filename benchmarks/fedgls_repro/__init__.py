"""FedGLS reproduction (Fu et al., TMLR): the grid and the report."""
