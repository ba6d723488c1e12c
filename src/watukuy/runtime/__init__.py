"""The runtime: the engine core and everything it drives.

``EngineCore`` (:mod:`watukuy.runtime.engine`) takes every dependency explicitly; the runner
polls a key through its lanes, the dispatcher delivers the outbox, the lease keeper holds a
key for one replica, and the operations answer ``inspect``, ``replay`` and the operator
commands. It imports :mod:`watukuy.model` and the building blocks, never an adapter, and does
no I/O of its own: the store, the clock and the HTTP client come in through ports.
"""
