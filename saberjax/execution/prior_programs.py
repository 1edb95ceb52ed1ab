"""The learned prior's programs of a mesh (saberjax.prior over every device's chunks), a base
of execution.programs.Programs: each device counts its chunks' (topic, count) pairs into a
histogram, and one program sums the histograms over the mesh and runs the fixed point."""

from __future__ import annotations

import functools

import jax.numpy as jnp
from jax import lax
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from saberjax import compilation, esca, prior
from saberjax.execution.mesh import local


class PriorPrograms:
    """The learned prior's programs; Programs supplies the mesh, the settings and the model's
    programs they use (_shard_map, _own_a_pairs, _model_of_rows)."""

    @functools.cached_property
    def zero_histograms(self):
        """width -> zero count histograms [N, K_pad, width], one per device (prior)."""
        return compilation.jit(
            lambda width: jnp.zeros((self.num_devices, self.hyper.padded_topics, width),
                                    jnp.int32),
            static_argnums=0, out_shardings=NamedSharding(self.mesh, self.by_device))

    @functools.cached_property
    def count_histogram(self):
        """(slot's chunk, its state, histograms) -> each device's histogram plus its chunk's
        (topic, count) pairs (esca.count_topic_histogram; histograms donated).  The chunk is used
        (and may be None otherwise) only for a state of z alone, whose A it rebuilds."""
        def body(chunk, chunk_state, histogram):
            chunk_state = local(chunk_state)
            if chunk_state.a_pairs is not None:  # by word: of the device's own chunk
                chunk_state = chunk_state._replace(a_pairs=self._own_a_pairs(
                    chunk_state.a_pairs))
            return esca.count_topic_histogram(local(chunk), chunk_state, histogram[0],
                                              self.hyper)[None]
        device = self.by_device
        return compilation.jit(self._shard_map(body, (device, device, device), device),
                               donate_argnums=2)

    @functools.cached_property
    def learned_alpha(self):
        """(histograms by device, model, length histogram) -> the model with alpha learned
        from the histograms' sum (prior.fixed_point) and B-hat's trees rebuilt for it (B and
        its totals as they are): esca.update_alpha over the mesh."""
        def body(histogram, model, lengths):
            histogram = histogram[0]
            if self.num_devices > 1:
                histogram = lax.psum(histogram, self.mesh.axis_names)
            alpha = prior.fixed_point(model.alpha, histogram, lengths, self.hyper.num_topics)
            return self._model_of_rows(model.word_topic, alpha, model.topic_totals)
        return compilation.jit(self._shard_map(body, (self.by_device, self.model_spec, P()),
                                               self.model_spec))
