"""Where and how ESCA runs: the only package that knows about devices.

    mesh             the one-axis and the two-axis (hosts x gpus) mesh, the roles of their
                     axes, shard specs, arrays between host and mesh
    memory           the memory plan: device and host bytes a run needs
    host_memory      the host bytes of the chunks, word shares and states the host holds,
                     and the choice between host memory and a chunk store
    plan             the run's plan from the settings: partition, chunking, resident,
                     streamed or stored
    placement        Placement, a corpus laid out on the mesh as planned, and its host views
    model_placement  the model's rows on the mesh: the row of each word, B to and from the
                     host
    topic_placement  the chunks' topics between the mesh and the host (checkpoints, models)
    programs         the shard_map programs of an iteration, the reduction and the learned
                     prior
    streamed_programs  the programs of streamed slots (by document or by word), one a slot
    compiled         initialisation, the streamed loop, and the iteration and alpha update
                     compiled ahead of time

The modules are imported by name (saberjax.execution.placement, ...): importing the package
loads none of them, so inference can take the memory plan without the engine.
"""
