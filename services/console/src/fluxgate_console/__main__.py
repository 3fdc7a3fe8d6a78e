from fluxgate_console.app import main

main()
