"""`storm-py logviewer`: serves the worker and daemon logs under a host's `storm.log.dir`."""
