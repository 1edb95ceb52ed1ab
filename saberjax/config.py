"""The settings of a training run, each defined once: TrainConfig, the table of every setting
with its default, help, requirement and role, and Hyperparams, the static part of it that the
ESCA step specialises on, derived from a TrainConfig.

The launchers' flags (cli.define_config_flags), saberjax.LDA's defaults, the checkpoint's
compatibility check (TrainConfig.model_settings) and the library's defaults of these settings
(the partitions, the prefetch depth, the EM iterations fitting theta, the host memory budget)
all read them here.
"""

from __future__ import annotations

import dataclasses
import math
import numbers

import jax
import jax.numpy as jnp
import numpy as np

from saberjax.backend import resolve_backend
from saberjax.seeding import SeedPrior, seed_prior
from saberjax.tree import padded_width

# how several devices share the work (TrainConfig.partition); "hybrid": the two-axis mesh
PARTITIONS = ("documents", "words", "hybrid")
MODEL_FORMATS = ("dense", "sparse")  # how the device holds B (TrainConfig.model_format)
HOST_MEMORY_FRACTION = 0.75  # the host memory budget by default: this fraction of what is free
DEFAULT_PREFETCH = 2  # chunks in flight to each device when streaming
DEFAULT_EM_ITERATIONS = 50  # EM iterations fitting theta (evaluation and inference)
MAX_INT16_TOPICS = 32_767
SEED_WEIGHT = 100.0  # a seed word's extra pseudo-counts in its topic (seeding)
# init_window_topics by default: WINDOW_TOPICS where K >= WINDOWED_TOPICS, else 0 (uniform)
WINDOW_TOPICS = 16
WINDOWED_TOPICS = 512


def default_window_topics(num_topics: int) -> int:
    """init_window_topics where the setting is None: WINDOW_TOPICS topics a window where K is
    at least WINDOWED_TOPICS, else 0 (uniform); DESIGN.md's "Initial topics" says why."""
    return WINDOW_TOPICS if num_topics >= WINDOWED_TOPICS else 0


def parse_mesh_shape(text: str) -> tuple[int, int]:
    """(hosts, gpus) of a two-axis mesh written "HxG" (ValueError naming the value)."""
    parts = str(text).lower().split("x")
    if len(parts) != 2 or not all(part.isdigit() and int(part) > 0 for part in parts):
        raise ValueError(f"mesh={text!r}: must be HOSTSxGPUS, two positive integers such as "
                         f"2x4")
    return int(parts[0]), int(parts[1])


def _setting(default, help_text: str, *, at_least: float | None = None,
             above: float | None = None, choices: tuple = (), model: bool = False):
    """A TrainConfig field: its one default, its help (the launchers' flag text), the values it
    takes (one of `choices`, or a number of the field's type, finite, at least `at_least` or
    above `above`; None where the field's type admits it) and whether it defines the model (a
    resumed run must share it with its checkpoint)."""
    return dataclasses.field(default=default, metadata=dict(
        help=help_text, at_least=at_least, above=above, choices=choices, model=model))


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """Every setting of a training run (saved with the model), each defined once here: the
    launchers' flags (cli.define_config_flags), saberjax.LDA's defaults and the checkpoint's
    compatibility check (model_settings) derive from these fields.  Invalid values are a
    ValueError naming the setting (setting_problem)."""

    num_topics: int = _setting(50, "Number of topics K.", at_least=2, model=True)
    alpha: float | None = _setting(None, "Document-topic prior of every topic (default 50 / K); "
                                   "the starting value when alpha is learned.", above=0,
                                   model=True)
    optimize_alpha_every: int = _setting(
        10, "Learn an asymmetric alpha (one value per topic) from the documents' topic counts "
        "every N iterations (Minka's fixed point, as tomotopy's optim_interval; 0: alpha stays "
        "fixed).", at_least=0, model=True)
    burn_in: int = _setting(0, "Iterations before alpha is first learned.", at_least=0,
                            model=True)
    beta: float = _setting(0.01, "Topic-word prior.", above=0, model=True)
    seed_words: str | None = _setting(
        None, "Seed words (guided topics): a file of lines `topic_index word word ...` or of "
        "JSON {\"topic_index\": [words]}, or that JSON itself; each seed word gets "
        "--seed_weight extra topic-word prior in its topics.", model=True)
    seed_weight: float = _setting(SEED_WEIGHT, "Extra topic-word prior (pseudo-counts) of a "
                                  "seed word in its topic (--seed_words).", above=0, model=True)
    init_window_topics: int | None = _setting(
        None, "Topics each token's initial topic is drawn from: the tokens of one window of "
        "1,024 consecutive corpus tokens share a random set of this many, so every document "
        "starts on few topics and the first iterations' document rows are short (0: every "
        f"token uniformly over all K; default {WINDOW_TOPICS} where K is at least "
        f"{WINDOWED_TOPICS:,}, else 0).", at_least=0, model=True)
    iterations: int = _setting(100, "ESCA iterations.", at_least=1)
    seed: int = _setting(0, "Random seed (of the initial topics; the launchers' train/test "
                         "split too).", at_least=0, model=True)
    backend: str = _setting("auto", "auto: the Pallas kernels on a GPU, else the XLA path.",
                            choices=("auto", "xla", "pallas"))
    model_format: str = _setting(
        "auto", "How the devices hold the word-topic counts B: dense (V x K arrays), sparse "
        "(each word's nonzero topics: the model grows with the corpus, not with K; partitioned "
        "by words, resident or streamed, or streamed by documents with the whole model on "
        "every device) "
        "or auto (dense where its model fits the devices, else sparse).",
        choices=("auto", *MODEL_FORMATS))
    chunk_tokens: int | None = _setting(
        None, "Tokens per PDOW chunk (default: one chunk per device, or, when the corpus does "
        "not fit the devices, the fewest chunks that do).", at_least=1)
    num_devices: int = _setting(0, "Devices of the mesh that shares the work (0: every device "
                                "of every process; on a CPU, one per core).", at_least=0)
    partition: str = _setting(
        "auto", "How several devices share the work: by documents (the model's counts reduced "
        "every iteration), by words (every document's A gathered every iteration; each device "
        "holds only its words' rows of the model, the documents resident or streamed past "
        "them), hybrid (the two-axis mesh of --mesh: by "
        "words within a host, by documents across hosts), or auto (hybrid with several "
        "processes of several devices each, else by words when the model outweighs the "
        "corpus or only fits that way).", choices=("auto", *PARTITIONS))
    mesh: str | None = _setting(
        None, "The two-axis mesh HOSTSxGPUS of partition hybrid, e.g. 2x4: words split over "
        "the gpus of a host, documents across the hosts, and only each device's word share "
        "of the counts crosses between hosts (default: processes x devices of each).")
    eval_every: int = _setting(0, "Score held-out documents every N iterations (0: only after "
                               "the last).", at_least=0)
    em_iterations: int = _setting(DEFAULT_EM_ITERATIONS, "EM iterations fitting theta in "
                                  "evaluation.", at_least=1)
    checkpoint_every: int = _setting(0, "Save the training state every N iterations (0: never).",
                                     at_least=0)
    device_memory_gb: float | None = _setting(
        None, "Device memory budget in GB; a corpus larger than it streams through the devices "
        "in chunks (default: free memory less headroom).", above=0)
    prefetch: int = _setting(DEFAULT_PREFETCH, "Chunks in flight to each device when "
                             "streaming.", at_least=1)
    host_memory_gb: float | None = _setting(
        None, "Host memory budget in GB; chunks the host holds (streamed from its memory, or "
        "resident on CPU devices) whose states do not fit it stream from a chunk store on local "
        "disk (--chunk_store) in chunks small enough for both budgets (default: "
        f"{HOST_MEMORY_FRACTION:.0%} of the memory available).", above=0)
    chunk_store: str | None = _setting(
        None, "Folder of the chunk store on local disk, used when the corpus does not fit "
        "--host_memory_gb; built once, reused while the corpus and chunking are the same "
        "(default: chunk_store/ in the cache folder, $SABERJAX_CACHE_DIR or "
        "~/.cache/saberjax).")

    def __post_init__(self):
        for field in dataclasses.fields(self):
            problem = self.setting_problem(field, getattr(self, field.name))
            if problem:
                raise ValueError(f"{field.name}={getattr(self, field.name)!r}: {problem}")
        if self.mesh is not None:
            parse_mesh_shape(self.mesh)
            if self.partition not in ("auto", "hybrid"):
                raise ValueError(f"mesh={self.mesh!r} lays out partition 'hybrid', not "
                                 f"partition={self.partition!r}")

    @staticmethod
    def setting_kind(field: dataclasses.Field) -> tuple[str, bool]:
        """(the type of a TrainConfig field's values: "int", "float", "str" or "bool"; whether it
        also takes None)."""
        kinds = [kind.strip() for kind in str(field.type).split("|")]
        return kinds[0], "None" in kinds

    @staticmethod
    def setting_problem(field: dataclasses.Field, value) -> str | None:
        """What is wrong with a value of a TrainConfig field ("must be ..."), or None: a value of
        another type (a bool is no number, a float no integer), a number that is not finite, one
        out of the field's range, a word not among its choices, an empty string."""
        meta = field.metadata
        kind, optional = TrainConfig.setting_kind(field)
        if value is None:
            return None if optional else "must be given"
        if meta["choices"]:
            return None if value in meta["choices"] else \
                f"must be one of {', '.join(meta['choices'])}"
        if kind == "str":
            return None if isinstance(value, str) and value else "must be a non-empty string"
        if kind == "bool":
            return None if isinstance(value, (bool, np.bool_)) else "must be true or false"
        if isinstance(value, (bool, np.bool_)) or not isinstance(
                value, (numbers.Integral if kind == "int" else numbers.Real)):
            return "must be an integer" if kind == "int" else "must be a number"
        if not math.isfinite(value):
            return "must be a finite number"
        if meta["at_least"] is not None and not value >= meta["at_least"]:
            return f"must be at least {meta['at_least']}"
        if meta["above"] is not None and not value > meta["above"]:
            return "must be positive" if meta["above"] == 0 else f"must be above {meta['above']}"
        return None

    @classmethod
    def model_settings(cls) -> tuple[str, ...]:
        """The settings that define the model (a resumed run must share them)."""
        return tuple(field.name for field in dataclasses.fields(cls) if field.metadata["model"])


@dataclasses.dataclass(frozen=True)
class Hyperparams:
    """The static settings of an ESCA run (hashable, so jit can specialise on them), derived
    from a TrainConfig (from_config, or create for a few of its settings): they have no
    defaults of their own.

    alpha is the document-topic prior every topic starts with (initial_alpha); a run that
    learns alpha carries its current values in the model (Model.alpha).  backend is resolved:
    "xla" or "pallas".  model_format is "dense" or "sparse" (saberjax.sparse_rows): the
    run's plan resolves the setting's "auto" (execution.plan), from_config keeps "dense" for
    it until then.  seeds: the seed words' prior over the rows of the model's arrays
    (seeding.SeedPrior), None without seed words.  wide_pairs: A's pairs are wide
    (state.pack_pairs), as the run's plan decides from K and the longest document; False
    until then.  init_window_topics: TrainConfig's, resolved (default_window_topics where
    it is None; esca.initial_topics)."""

    num_topics: int
    alpha: float
    beta: float
    backend: str
    model_format: str
    seeds: SeedPrior | None
    wide_pairs: bool
    init_window_topics: int

    @classmethod
    def from_config(cls, config: TrainConfig, vocab=None) -> "Hyperparams":
        """The config's num_topics, alpha (50 / K where it is None, the paper's default), beta
        and backend, resolved (backend.resolve_backend: "auto" is "pallas" on a GPU), and its
        seed words' prior over the words of `vocab` (seeding.seed_prior; None: no seeds)."""
        alpha = 50.0 / config.num_topics if config.alpha is None else float(config.alpha)
        model_format = "sparse" if config.model_format == "sparse" else "dense"
        seeds = None if vocab is None else seed_prior(config.seed_words, config.seed_weight,
                                                      vocab, config.num_topics)
        return cls(int(config.num_topics), alpha, float(config.beta),
                   resolve_backend(config.backend), model_format, seeds, wide_pairs=False,
                   init_window_topics=int(default_window_topics(config.num_topics)
                                          if config.init_window_topics is None
                                          else config.init_window_topics))

    @classmethod
    def create(cls, num_topics: int, **settings) -> "Hyperparams":
        """from_config(TrainConfig(num_topics=num_topics, **settings)): TrainConfig's defaults
        and checks (a ValueError naming the setting) for what is not given."""
        return cls.from_config(TrainConfig(num_topics=num_topics, **settings))

    @property
    def sparse(self) -> bool:
        """Whether the devices hold B as sparse rows (saberjax.sparse_rows)."""
        return self.model_format == "sparse"

    @property
    def padded_topics(self) -> int:
        return padded_width(self.num_topics)

    def initial_alpha(self) -> jax.Array:
        """alpha for every padded topic column: hyper.alpha for real topics, 0 in padding."""
        return jnp.where(jnp.arange(self.padded_topics) < self.num_topics,
                         jnp.float32(self.alpha), jnp.float32(0))

    @property
    def topic_dtype(self):
        """int16 topic ids while they fit (halves the bytes of z and A), else int32."""
        return jnp.int16 if self.num_topics <= MAX_INT16_TOPICS else jnp.int32
