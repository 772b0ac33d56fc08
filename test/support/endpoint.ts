/** Tests write and delete freely: refuse an endpoint that is not on this machine unless told otherwise. */
export function assertTestEndpoint(endpoint: string) {
  const { hostname } = new URL(endpoint);
  const loopback = hostname === 'localhost' || hostname === '[::1]' || /^127\./.test(hostname);
  if (!loopback && process.env.RUNPLANE_TEST_ALLOW_REMOTE !== '1') {
    throw new Error(`refusing to run tests against ${endpoint}: not a loopback address (set RUNPLANE_TEST_ALLOW_REMOTE=1 to allow)`);
  }
}
