import { describeContractOf } from "./run-contract";

// The backend contract on the `throwaway` driver (drivers.ts has its testbed).
describeContractOf("throwaway");
