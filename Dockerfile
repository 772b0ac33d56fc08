# One image for both services (docker-compose.yml): the server and its engine, compiled once.
#
# build: every package and the server to JavaScript (npm run build).
FROM node:20-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
COPY packages/engine/package.json packages/engine/
COPY packages/client/package.json packages/client/
RUN npm ci
COPY . .
RUN npm run build

# run: the production dependencies the lockfile pins, the compiled JavaScript, no compiler.
FROM node:20-slim
WORKDIR /app
ENV NODE_ENV=production
COPY package.json package-lock.json ./
COPY packages/engine/package.json packages/engine/
COPY packages/client/package.json packages/client/
RUN npm ci --omit=dev && npm cache clean --force
COPY --from=build /app/dist dist
COPY --from=build /app/packages/engine/dist packages/engine/dist
COPY --from=build /app/packages/client/dist packages/client/dist
COPY schema.graphql ./
# The engine's data volume, writable by the user the processes run as.
RUN mkdir /data && chown node:node /data
USER node
ENV HOST=0.0.0.0 PORT=4000
EXPOSE 4000 8000
# node itself is the container's main process (no npm in between): `docker stop` sends it
# SIGTERM, and the server stops gracefully (subscribers are told to reconnect, appends in
# flight finish, the engine is flushed).
CMD ["node", "dist/cli/runplane.js", "start"]
