extension Array where Element: Comparable {
    /// The middle value once sorted (the upper of the two middle ones for an even count): what
    /// the benchmarks report, the least disturbed by a busy machine's outliers. Needs a value.
    var median: Element { sorted()[count / 2] }
}
