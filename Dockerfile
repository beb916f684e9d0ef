# syntax=docker/dockerfile:1
# One image with every Vectide role; the command picks it:
#   vectide standalone | vectide run rootcoord|proxy|querynode|datanode|ingest
# The Spark data node needs a JRE (17): pyspark's jars run on it.

ARG PYTHON_IMAGE=python:3.11.10-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
# metadata first: the dependency layer is rebuilt only when setup.cfg changes
COPY setup.cfg setup.py pyproject.toml README.md ./
COPY services/__init__.py services/py.typed services/
COPY streaming/__init__.py streaming/
# the Avro schemas of the channel messages (the wire format) ship in the package
COPY schemas schemas
RUN python -m venv /opt/vectide \
    && /opt/vectide/bin/pip install --no-compile /src
COPY services services
COPY streaming streaming
RUN /opt/vectide/bin/pip install --no-deps --no-compile --force-reinstall /src

FROM ${PYTHON_IMAGE}
# a JRE for the data node's Spark session; procps gives Spark's scripts `ps`
RUN apt-get update \
    && apt-get install -y --no-install-recommends openjdk-17-jre-headless=17.* procps=2:4.* \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --gid 10001 vectide \
    && useradd --uid 10001 --gid 10001 --create-home --home-dir /home/vectide vectide \
    && mkdir -p /var/lib/vectide /etc/vectide \
    && chown vectide:vectide /var/lib/vectide
COPY --from=build /opt/vectide /opt/vectide
ENV PATH=/opt/vectide/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    VECTIDE_INFRA_RUN_DIR=/var/lib/vectide
USER 10001:10001
WORKDIR /home/vectide
# 19530 Milvus gRPC (proxy, standalone), 9091 /metrics and /healthz
EXPOSE 19530 9091
ENTRYPOINT ["vectide"]
CMD ["standalone"]
