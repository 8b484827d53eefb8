"""keras.io, "Text classification with Transformer": ``TransformerBlock`` (``MultiHeadAttention``, a feed-forward
``keras.Sequential`` without an ``Input``, ``LayerNormalization``, ``Dropout``) and ``TokenAndPositionEmbedding``
(positions from ``ops.arange`` through an ``Embedding``) as keras.io writes them, on a float ``Input`` of token ids;
``GlobalAveragePooling1D`` and a softmax head.  The reviews are made up (IMDB is a download): a review is positive
when it holds more of the "good" tokens than of the "bad" ones."""
import numpy as np

import flowlayers as keras
from flowlayers import layers, ops

vocab_size = 40
maxlen = 16
embed_dim = 16
num_heads = 2
ff_dim = 16
# keras.io drops 0.1; off here, so that each step is the same math as Keras' (the masks are drawn differently)
rate = 0.0


class TransformerBlock(layers.Layer):
    def __init__(self, embed_dim, num_heads, ff_dim, rate=0.1):
        super().__init__()
        self.att = layers.MultiHeadAttention(num_heads=num_heads, key_dim=embed_dim)
        self.ffn = keras.Sequential(
            [layers.Dense(ff_dim, activation="relu"), layers.Dense(embed_dim)]
        )
        self.layernorm1 = layers.LayerNormalization(epsilon=1e-6)
        self.layernorm2 = layers.LayerNormalization(epsilon=1e-6)
        self.dropout1 = layers.Dropout(rate)
        self.dropout2 = layers.Dropout(rate)

    def call(self, inputs):
        attn_output = self.att(inputs, inputs)
        attn_output = self.dropout1(attn_output)
        out1 = self.layernorm1(inputs + attn_output)
        ffn_output = self.ffn(out1)
        ffn_output = self.dropout2(ffn_output)
        return self.layernorm2(out1 + ffn_output)


class TokenAndPositionEmbedding(layers.Layer):
    def __init__(self, maxlen, vocab_size, embed_dim):
        super().__init__()
        self.token_emb = layers.Embedding(input_dim=vocab_size, output_dim=embed_dim)
        self.pos_emb = layers.Embedding(input_dim=maxlen, output_dim=embed_dim)

    def call(self, x):
        maxlen = ops.shape(x)[-1]
        positions = ops.arange(start=0, stop=maxlen, step=1)
        positions = self.pos_emb(positions)
        x = self.token_emb(x)
        return x + positions


def get_data(mnist):
    rng = np.random.default_rng(0)
    x = rng.integers(0, vocab_size, size=(192, maxlen))
    good, bad = np.isin(x, range(1, 6)).sum(axis=1), np.isin(x, range(6, 11)).sum(axis=1)
    y = (good > bad).astype("int32")
    return {"x": x[:128], "y": y[:128], "x_test": x[128:]}


def make_model():
    inputs = layers.Input(shape=(maxlen,))
    embedding_layer = TokenAndPositionEmbedding(maxlen, vocab_size, embed_dim)
    x = embedding_layer(inputs)
    transformer_block = TransformerBlock(embed_dim, num_heads, ff_dim, rate)
    x = transformer_block(x)
    x = layers.GlobalAveragePooling1D()(x)
    x = layers.Dropout(rate)(x)
    x = layers.Dense(20, activation="relu")(x)
    x = layers.Dropout(rate)(x)
    outputs = layers.Dense(2, activation="softmax")(x)
    model = keras.Model(inputs=inputs, outputs=outputs)
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    return model


def train(model, data):
    return model.fit(data["x"], data["y"], batch_size=32, epochs=2, shuffle=False, verbose=0)
