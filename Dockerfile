# The image of every process: gateway, referral service, relay, delivery and the migration step.
#   docker build -t referral-callbacks .
#   docker run --rm referral-callbacks node dist/services/relay/main.js   (see docker-compose.yml)
#
# Stage 1 installs every dependency and compiles the TypeScript to dist/ (`npm run build`).
# Stage 2 holds the production dependencies and dist/ only, and runs `node` directly under
# tini (PID 1), so SIGTERM reaches node and each process drains before it exits.
# gen/ (generated protobuf and Prisma client code) is committed, so no generator runs here.

FROM node:20-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY gateway gateway
COPY services services
COPY scripts scripts
COPY gen gen
COPY prisma prisma
COPY docs docs
RUN npm run build

FROM node:20-bookworm-slim AS runtime
RUN apt-get update \
  && apt-get install -y --no-install-recommends tini \
  && rm -rf /var/lib/apt/lists/*
WORKDIR /app
ENV NODE_ENV=production
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force
COPY --from=build /app/dist dist
USER node
ENTRYPOINT ["/usr/bin/tini", "--"]
CMD ["node", "dist/gateway/main.js"]
