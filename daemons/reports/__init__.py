"""Pure views over what Nimbus answers (cluster_info, topology_details, typed in daemons/answers/):
the shapes the UI's REST API serves, the UI's pages draw, and `storm-py monitor` prints. No
daemon imports (not even Nimbus's package): the UI and the CLI both read from here."""
