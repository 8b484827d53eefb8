from setuptools import find_packages, setup

setup(
    name="flowlayers",
    version="0.1.0",
    description="Keras-style layers whose models are logical: one config line picks consistent (SBP) or "
                "mirrored execution over the devices of a host.",
    long_description=open("README.md").read() if __import__("os").path.exists("README.md") else "",
    long_description_content_type="text/markdown",
    license="Apache-2.0",
    license_files=["LICENSE"],
    # the repository's home is not settled yet: these name the placeholder github.com/flowlayers/flowlayers
    url="https://github.com/flowlayers/flowlayers",
    project_urls={
        "Documentation": "https://github.com/flowlayers/flowlayers/tree/main/docs",
        "Source": "https://github.com/flowlayers/flowlayers",
        "Issues": "https://github.com/flowlayers/flowlayers/issues",
    },
    classifiers=[
        "Development Status :: 3 - Alpha",
        "Intended Audience :: Developers",
        "Intended Audience :: Science/Research",
        "License :: OSI Approved :: Apache Software License",
        "Operating System :: OS Independent",
        "Programming Language :: Python :: 3",
        "Programming Language :: Python :: 3 :: Only",
        "Programming Language :: Python :: 3.10",
        "Programming Language :: Python :: 3.11",
        "Programming Language :: Python :: 3.12",
        "Programming Language :: Python :: 3.13",
        "Topic :: Scientific/Engineering :: Artificial Intelligence",
        "Typing :: Typed",
    ],
    keywords=["deep learning", "keras", "oneflow", "sbp", "distributed training", "tensorflow", "jax"],
    python_requires=">=3.10",
    packages=find_packages(include=["flowlayers", "flowlayers.*"])
    + find_packages("backends", include=["flowlayers_tensorflow", "flowlayers_tensorflow.*", "flowlayers_jax",
                                         "flowlayers_jax.*"]),
    package_dir={"flowlayers_tensorflow": "backends/flowlayers_tensorflow", "flowlayers_jax": "backends/flowlayers_jax"},
    # PEP 561: the package's annotations (the backend contract's protocols) are meant for type checkers
    package_data={"flowlayers": ["py.typed"]},
    install_requires=["numpy>=1.26,<3"],
    extras_require={
        # the engine: the CPU build of TensorFlow is enough where no GPU is wanted
        # (no tf-keras: nothing uses it, and it requires the full "tensorflow" wheel, which would then be installed
        # over tensorflow-cpu's files)
        "tensorflow-cpu": ["tensorflow-cpu>=2.21,<2.22", "keras>=3.15,<4"],
        "tensorflow": ["tensorflow>=2.21,<2.22", "keras>=3.15,<4"],
        # the jax backend: JAX's CPU build (0.10.2 is the newest for Python 3.11); a GPU user installs JAX's CUDA
        # build as JAX documents (pip install "jax[cuda13]")
        "jax": ["jax[cpu]>=0.10.2,<0.12"],
        # what the tutorials use: bundled real data (scikit-learn's digits) and the pictures
        "examples": ["scikit-learn>=1.4", "matplotlib>=3.8"],
        # the tests run every tutorial, pictures included
        # (tensorboard: Keras' TensorBoard callback writes through it, as it does in Keras)
        "test": ["pytest>=8", "pytest-xdist>=3.5", "scikit-learn>=1.4", "matplotlib>=3.8", "tensorboard>=2.16"],
        # mkdocs build --strict: the Material theme, the API reference from docstrings (mkdocstrings), tutorials
        # embedded with pymdownx.snippets and code coloured by Pygments at build time
        "docs": ["mkdocs>=1.6", "mkdocs-material>=9.5", "mkdocstrings[python]>=0.26", "pymdown-extensions>=10",
                 "Pygments>=2.16"],
    },
    entry_points={"flowlayers.backends": ["tensorflow = flowlayers_tensorflow:Backend",
                                          "jax = flowlayers_jax:Backend"]},
)
