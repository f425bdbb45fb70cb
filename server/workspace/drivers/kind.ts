import { z } from "zod";

/**
 * The form of a stored backend kind (a driver definition's `kind`): what API input and JSON columns are
 * checked against at the boundary. Which kinds exist is the driver registry's to say, and whether this
 * installation runs one its DriverSet's (`find`, `forKind`), so a new driver adds no kind here.
 */
export const ZBackendKind = z
  .string()
  .regex(/^[a-z][a-z0-9-]{0,39}$/, "a backend kind: lowercase letters, digits and dashes");

/** A stored backend kind: a driver definition's `kind` (which exist: the driver registry). */
export type BackendKind = z.infer<typeof ZBackendKind>;
