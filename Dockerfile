# One image for every jury process: `jury worker`, `jury flower`, `jury simulate`, `jury submit`…
# (see docker-compose.yml). Dependencies are installed from requirements.lock, pinned exactly.
FROM python:3.11-slim-bookworm

# LITELLM_LOCAL_MODEL_COST_MAP: LiteLLM would otherwise fetch its price map at every start.
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    LITELLM_LOCAL_MODEL_COST_MAP=True

WORKDIR /app

# Dependencies first: this layer is rebuilt only when the lock file changes.
COPY requirements.lock ./
RUN pip install -r requirements.lock

COPY pyproject.toml README.md ./
COPY jury ./jury
RUN pip install --no-deps . \
    && useradd --create-home --uid 10001 jury

USER jury
# Exec form everywhere: the command is PID 1's child (with compose's `init: true`), so SIGTERM
# reaches Celery and a worker stops warm, finishing its running judge calls.
CMD ["jury", "--help"]
