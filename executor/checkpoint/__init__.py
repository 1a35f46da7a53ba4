"""Storm's checkpoint mechanism (docs/topology-guide.md, "State"): the `$checkpointspout`
system spout, the `$checkpoint` stream every bolt of a stateful topology handles or forwards,
and the stateful bolts' PREPARE / COMMIT / ROLLBACK / INITSTATE protocol."""
