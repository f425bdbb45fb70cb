// Loaded only by `prisma dev` (@prisma/dev), which Berth does not use: the real package needs Node 22.
export async function startLocalDurableStreamsServer() {
  throw new Error(
    "`prisma dev` is not supported in Berth (its streams server needs Node 22); `npm start` runs PostgreSQL for you",
  );
}
