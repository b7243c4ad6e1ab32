# HADIS-TS container image: the compiled `hadis` CLI, run as a non-root user. One image for every
# service; the command picks one (`serve router`, `serve worker`, `serve gateway`, …).
#   docker build -t hadis-ts:local .
#   docker run --rm hadis-ts:local serve gateway --nats nats://nats:4222 --http-host 0.0.0.0
# Not built here (no container engine on the machines this was written on): test/ops/deploy.test.ts
# checks it against the build and the CLI. See docs/deployment.md.

# 1. Build: install every dependency, compile the TypeScript to dist/, keep production dependencies only.
FROM node:20-bookworm-slim AS build
WORKDIR /app
# onnxruntime-node's install step downloads CUDA libraries: skipped (the CPU runtime ships in the package).
ENV ONNXRUNTIME_NODE_INSTALL=skip ONNXRUNTIME_NODE_INSTALL_CUDA=skip
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY contracts contracts
COPY actors actors
COPY services services
COPY tools tools
COPY ops/scripts ops/scripts
RUN npm run build && npm prune --omit=dev --no-audit --no-fund

# 2. Run: the compiled CLI, its data (profiles/, the dashboard's page) and production dependencies.
FROM node:20-bookworm-slim AS runtime
ENV NODE_ENV=production
WORKDIR /app
COPY --from=build /app/package.json ./
COPY --from=build /app/node_modules node_modules
COPY --from=build /app/dist dist
COPY profiles profiles
COPY services/dashboard/public services/dashboard/public
# The node image's unprivileged user (uid 1000).
USER node
# 8000: the HTTP gateway (serve gateway); 9464: /metrics, /healthz and /readyz (--metrics-port 9464).
EXPOSE 8000 9464
ENTRYPOINT ["node", "dist/services/cli/main.js"]
CMD ["--help"]
