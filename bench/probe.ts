import { singleRequestLatency } from './latency.ts';
import { startServerProcess } from './server.ts';

process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
const server = await startServerProcess();
try {
  console.log(JSON.stringify(await singleRequestLatency(server), null, 1));
} finally {
  await server.stop();
}
