# syntax=docker/dockerfile:1
# backfillctl's image: `reconcile --watch` next to Airflow (deploy/kubernetes/, docs/deploy.md).
#
# The base is pinned by digest, never by a movable tag. The digest below is python:3.11-slim-bookworm's as
# published in public Dockerfiles; it was NOT checked against the registry from the machine that wrote this file
# (no registry access there). Check it, and refresh it, with:
#   docker buildx imagetools inspect python:3.11-slim-bookworm --format '{{json .Manifest.Digest}}'
# CPython 3.11 on Linux x86-64 is what requirements/reconcile.txt is locked for (scripts/lock --platform adds
# another architecture's hashes).
ARG PYTHON_IMAGE=python:3.11-slim-bookworm@sha256:a36c24f9cbdf4fd0f52d67f0823eeac19c2028c637cecc392d97f980d4fec56b

FROM ${PYTHON_IMAGE} AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1 PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
# The release's locked wheelhouse, every file by its sha256 (as the reconcile workflow installs it), then
# backfillctl itself from this checkout with the locked build backend: nothing is resolved at build time.
COPY requirements/reconcile.txt requirements/reconcile.txt
RUN python -m venv /opt/backfillctl \
    && /opt/backfillctl/bin/python -m pip install --require-hashes --no-deps --only-binary=:all: \
        -r requirements/reconcile.txt
COPY . .
RUN /opt/backfillctl/bin/python -m pip install --no-deps --no-build-isolation --no-index . \
    && /opt/backfillctl/bin/python -m pip check

FROM ${PYTHON_IMAGE}
# git: GitPython runs it to read the specs checkout's history (queue order, the gate). Left unpinned on purpose:
# bookworm's security updates of git are wanted at each rebuild.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends git \
    && rm -rf /var/lib/apt/lists/*
COPY --from=build /opt/backfillctl /opt/backfillctl
# A fixed non-root user (uid 10001: Kubernetes' runAsNonRoot can check a numeric USER) with no login shell.
RUN useradd --uid 10001 --user-group --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin backfillctl
ENV PATH=/opt/backfillctl/bin:$PATH PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 \
    BACKFILLCTL_SPECS_DIR=/git/repo/specs
USER 10001:10001
WORKDIR /git
EXPOSE 9108
# The dead-man's check: /healthz answers 503 after failed passes or when no good pass came for twice
# --expect-every (docs/deploy.md). It is served only with --metrics-port 9108; the slim base has no curl.
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
    CMD ["python", "-c", "import sys, urllib.request; sys.exit(urllib.request.urlopen('http://127.0.0.1:9108/healthz', timeout=4).status != 200)"]
ENTRYPOINT ["backfillctl"]
CMD ["reconcile", "--watch", "--metrics-port", "9108", "--metrics-host", "0.0.0.0"]
