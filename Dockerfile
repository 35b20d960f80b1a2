# The service on gunicorn, as a non-root user, runtime dependencies only.
#   docker build -t attention-workbench .
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN useradd --create-home --uid 10001 workbench
WORKDIR /app

COPY pyproject.toml README.md ./
COPY service ./service
RUN pip install --editable '.[clickhouse]' && rm -rf /root/.cache
COPY migrations ./migrations
COPY content ./content
COPY frontend ./frontend
COPY exercises ./exercises
COPY gunicorn.conf.py ./

USER workbench
ENV WORKBENCH_ENV=production WORKBENCH_LOG_JSON=1 WORKBENCH_BIND=0.0.0.0:8000
EXPOSE 8000
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s \
  CMD python -c "import urllib.request,sys; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:8000/readyz', timeout=2).status == 200 else 1)"
# Migrations run before gunicorn starts.
CMD ["sh", "-c", "workbench db upgrade && exec gunicorn -c gunicorn.conf.py 'service.app:create_app()'"]
