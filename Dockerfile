# One image for both services: the engine (npm run engine) and the API (npm start).
FROM node:20-slim
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci
COPY . .
ENV HOST=0.0.0.0 PORT=4000
EXPOSE 4000 8000
CMD ["npm", "start"]
