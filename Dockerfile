# One image for both services: the engine and the API (docker-compose.yml).
FROM node:20-slim
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev
COPY . .
ENV HOST=0.0.0.0 PORT=4000
EXPOSE 4000 8000
# node itself is the container's main process (no npm in between): `docker stop` sends it
# SIGTERM, and the server stops gracefully (subscribers are told to reconnect, appends in
# flight finish, the engine is flushed).
CMD ["node", "--import", "tsx", "src/main.ts"]
