/**
 * Gives use cases their dependencies, for the factories that compose named use cases into one service
 * object: `bindDeps(deps)(useCase)` turns `(deps, ...args) => R` into `(...args) => R`. Curried so that
 * TypeScript keeps a generic use case generic (`withLease<T>` stays `<T>(...) => Promise<T>`).
 */
export function bindDeps<D>(deps: D) {
  return <A extends unknown[], R>(useCase: (deps: D, ...args: A) => R) =>
    (...args: A): R =>
      useCase(deps, ...args);
}
