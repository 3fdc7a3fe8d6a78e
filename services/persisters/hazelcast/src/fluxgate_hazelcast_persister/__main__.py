from fluxgate_hazelcast_persister.app import main

main()
