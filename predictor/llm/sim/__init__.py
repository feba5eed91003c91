"""Request-level simulation of an LLM serving engine (discrete-event, one step at a time).

``workload`` draws requests (arrivals and lengths), ``trace`` reads them from a CSV file,
``policies`` registers each engine's scheduler, ``kvcache`` sizes the paged KV pool from the
memory model, ``steptable`` times engine steps from the kernel model (one batched call, then
interpolation), ``engine`` runs the event loop, ``metrics`` summarises it and ``run`` ties them
together per device. Design notes: docs/design/serving_sim.md.
"""
