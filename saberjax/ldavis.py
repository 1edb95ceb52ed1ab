"""A model as pyLDAvis shows it: the arguments of pyLDAvis.prepare, and its page.

pyLDAvis is not a dependency: `prepare_arguments` needs only numpy (TopicModel.to_pyldavis),
and `pyldavis_html` imports pyLDAvis when asked for the page, an ImportError saying how to
install it otherwise.
"""

from __future__ import annotations

import numpy as np

PYLDAVIS_HINT = "pip install pyLDAvis"


def prepare_arguments(model, documents, iterations: int | None = None) -> dict:
    """pyLDAvis.prepare's keyword arguments for a TopicModel and documents (anything
    TopicModel.transform takes): topic_term_dists (K x V topic_word), doc_topic_dists (D x K,
    EM fold-in), doc_lengths (D), vocab (V words) and term_frequency (V: the documents'
    tokens of each word)."""
    from saberjax.config import DEFAULT_EM_ITERATIONS  # noqa: PLC0415
    from saberjax.corpus import Corpus, from_count_matrix  # noqa: PLC0415
    from saberjax.inference import in_model_vocabulary  # noqa: PLC0415

    documents = in_model_vocabulary(model, documents)
    corpus = (documents if isinstance(documents, Corpus)
              else from_count_matrix(documents, model.vocab, keep_empty=True))
    theta = model.transform(corpus, iterations or DEFAULT_EM_ITERATIONS)
    return dict(topic_term_dists=model.topic_word.astype(np.float64),
                doc_topic_dists=theta.astype(np.float64),
                doc_lengths=corpus.doc_lengths().astype(np.int64),
                vocab=list(model.vocab),
                term_frequency=np.bincount(corpus.word_ids,
                                           minlength=model.num_words).astype(np.int64))


def pyldavis_html(arguments: dict, sort_topics: bool = False) -> str:
    """The pyLDAvis page (one HTML document) of prepare_arguments' result; ImportError naming
    PYLDAVIS_HINT without pyLDAvis.  Topics keep the model's order unless sort_topics."""
    try:
        import pyLDAvis  # noqa: PLC0415 (optional dependency)
    except ImportError as error:
        raise ImportError(f"the pyLDAvis page needs pyLDAvis ({PYLDAVIS_HINT})") from error
    from pyLDAvis._prepare import js_PCoA  # noqa: PLC0415

    def real_pcoa(distributions):
        # pyLDAvis's default map of the topics, less the imaginary parts np.linalg.eig gives
        # a symmetric matrix's eigenvectors in rounding, which its JSON cannot hold
        return np.real(js_PCoA(distributions))

    prepared = pyLDAvis.prepare(**arguments, mds=real_pcoa, sort_topics=sort_topics, n_jobs=1)
    return pyLDAvis.prepared_data_to_html(prepared)
