/**
 * Subscription delivery, over WebSocket (graphql-ws) and SSE (yoga), on the seams those
 * libraries document:
 *
 * 1. Subscribe: envelop's `subscribe` of the operation's envelope (yoga's recipe for graphql-ws
 *    over SSE and WebSocket alike); `sharedDelivery` sets its subscribe function (envelop's
 *    `setSubscribeFn`): the Pothos `subscribe` resolver opens the feed, and each event is
 *    executed through the Pothos resolvers once for every subscriber asking alike.
 * 2. Every result then passes envelop's `onSubscribeResult`/`onNext` hooks (masking and any
 *    plugin added later), per subscriber, before it is written.
 * 3. Write: SSE through yoga's `onResultProcess` (sse.ts); WebSocket through graphql-ws's
 *    `onOperation` hook, which hands graphql-ws the handle of socket-frames.ts: it writes each
 *    result's shared serialization as the `next` frame and holds its bytes in the connection's
 *    send buffer until the socket took them.
 *
 * Back-pressure is the feeds': they hand over an event only while the connection's send buffer
 * has room (streams/send-buffer.ts), so nothing here queues.
 */
export { sharedDelivery, sharedExecution } from './shared-execution.ts';
export { deliverOverSocket, nextFrame, type SocketSubscription } from './socket-frames.ts';
export { sseDelivery, sseStream, streamEventId } from './sse.ts';
