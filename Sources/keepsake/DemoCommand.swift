enum DemoCommand { static func run(_ c: Context) throws {} }
