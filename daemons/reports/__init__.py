"""Pure views over what Nimbus answers (cluster_info, topology details): the shapes the UI's REST
API serves, the UI's pages draw, and `storm-py monitor` prints. No daemon imports: the UI and the
CLI both read from here."""
