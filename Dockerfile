# q2api gateway image: slim, runs as an unprivileged user, healthy when /readyz says it can serve.
#   docker build -t q2api .
#   docker run -p 8000:8000 -e AMAZONQ_REFRESH_TOKEN=… -v q2api-data:/data q2api
# Several replicas: see docker-compose.yml and the README ("Several replicas").

# Python 3.11: the version requirements.lock is made for and CI tests on.
FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md requirements.lock ./
COPY q2api ./q2api
# q2api and its dependencies at the releases in requirements.lock (the ones CI tested), as wheels.
RUN pip wheel --no-cache-dir --wheel-dir /wheels -c requirements.lock .

FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    Q2API_DATA_DIR=/data
RUN useradd --system --uid 10001 --user-group --home-dir /data --create-home --shell /usr/sbin/nologin q2api \
    && chmod 0700 /data
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir --no-index /wheels/*.whl && rm -rf /wheels
USER q2api
WORKDIR /data
VOLUME ["/data"]
EXPOSE 8000
# /readyz answers 503 (urlopen raises, exit 1) until an account can serve.
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/readyz', timeout=2)"]
CMD ["q2api", "serve", "--host", "0.0.0.0", "--port", "8000"]
