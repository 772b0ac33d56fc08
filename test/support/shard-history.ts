/** The lease rows' history checks, shared with the chaos harness. */
export { lineageViolations, overlaps, staleWrites, type Tenure, tableStream, tenures } from '../../chaos/shard-leases.ts';
