// Where the pre-filled plants' ids sit. Plant k (1..count) of a big store has the id k * step, the
// step spreading them evenly over the positive int64 range, so that the random 63-bit ids of
// create-rand land between stored plants: each one goes into a leaf of the 10M-plant table (and
// of its tag index) that already holds plants, as the issue's "random ids into a table that already
// held 10 million rows" means. With ids 1..count, every random id was larger than all of them and
// went to a part of the tree as empty as an empty store's.

/** The spacing of `count` pre-filled ids over 1..2^63-1; 1 for a store filled with none. */
export const idStep = (count) => (count > 0 ? (2n ** 63n - 1n) / BigInt(count + 1) : 1n)

/** The id of stored plant k (1-based) of a store whose ids are `step` apart (1 for a seeded store). */
export const storedId = (k, step = 1n) => BigInt(k) * step
