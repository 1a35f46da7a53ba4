"""The Nimbus RPC layer: ZeroMQ + msgpack frames with a version field and typed errors.

- protocol: the wire format (pure), the error kinds and their exception classes;
- server: RpcServer, a lifecycle Service dispatching `op` to a handler registry;
- client: RpcClient (`call(op, **args)`) and client_from_conf.

Kept import-free so that importing the pure protocol pulls in no zmq.
"""
