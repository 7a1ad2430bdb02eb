// Failure policy: fail loudly - `prisma dev` (the only user of this package) is not part of this project.
throw new Error(
  "@prisma/streams-local is replaced in this project (package.json overrides): `prisma dev` is not supported here; use scripts/infra/postgres.ts",
);
