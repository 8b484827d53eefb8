# Sourced by the scripts run on the lent GPU: the wheels of .gpu/whl (keras, namex, optree) into /tmp/site and
# flowlayers (editable, no dependencies), unless INSTALL=0 (a check on a CPU where both are installed); Keras on JAX.
if [ "${INSTALL:-1}" = 1 ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
        .gpu/whl/*.whl || exit 1
    python3 -m pip install -q --no-index --no-deps --no-build-isolation -e . || exit 1
    export PYTHONPATH=/tmp/site
fi
export PYTHONUNBUFFERED=1 KERAS_BACKEND=jax
