from fluxgate_scylla_persister.app import main

main()
